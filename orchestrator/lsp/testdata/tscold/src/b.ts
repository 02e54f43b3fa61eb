import { scale } from "./lib";

export const b = scale(2) + scale(3);
