import sys

print("done at once", sys.argv[1:])
