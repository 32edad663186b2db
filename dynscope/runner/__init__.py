"""Run a user's program under instrumentation: a launcher process and a recording child."""
