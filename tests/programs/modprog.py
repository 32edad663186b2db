import sys

print(f"module={__name__} argv={sys.argv[1:]}")
