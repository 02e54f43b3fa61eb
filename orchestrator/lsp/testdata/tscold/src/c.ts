import * as lib from "./lib";

export const c = lib.scale(4);
