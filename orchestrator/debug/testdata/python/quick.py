print("done at once")
