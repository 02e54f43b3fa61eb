import sys


def square(n):
    result = n * n
    return result


def main():
    items = list(range(500))
    text = "x" * 10000
    name = "berth"
    total = square(7)
    print("total", total)
    print("to stderr", file=sys.stderr)
    return total


if __name__ == "__main__":
    main()
