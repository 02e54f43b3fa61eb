import { English, Greeter, hello } from "./greet";

const g: Greeter = new English();
console.log(g.greet("wörld 🌍"), hello("x"));
console.log(hello("again"), hello("twice"));
