def parse(text):
    return int(text)


parse("not a number")
