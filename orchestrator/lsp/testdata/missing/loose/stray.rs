fn stray() {}
