ANSWER = "installed by %pip"
