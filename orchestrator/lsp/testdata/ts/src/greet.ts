/** Greeter greets people. */
export interface Greeter {
  greet(name: string): string;
}

/** English greets in English. */
export class English implements Greeter {
  greet(name: string): string {
    return "Hello, " + name;
  }
}

/** hello greets name in English. */
export function hello(name: string): string {
  return new English().greet(name);
}
