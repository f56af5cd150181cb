/** What the SDK calls itself in hello. */
export const SOFTWARE = "boxwire-typescript/0.1.0";
