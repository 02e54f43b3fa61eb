from greet import Greeter, hello

g: Greeter = Greeter()
print(g.greet("wörld 🌍"), hello("x"))
print(hello("again"), hello("twice"))
