/** Multiplies n by three. */
export function scale(n: number): number {
  return n * 3;
}
