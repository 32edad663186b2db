"""dynscope fix: try remedies for a program's problems in fresh runs and keep the proven ones."""
