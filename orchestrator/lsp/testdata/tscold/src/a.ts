import { scale } from "./lib";

export const a = scale(1);
