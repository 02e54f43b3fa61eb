package loose

func F() {}
