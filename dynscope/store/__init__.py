"""The capture file format (one SQLite file): schema, writer, reader."""
