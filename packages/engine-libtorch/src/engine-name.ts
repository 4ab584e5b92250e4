/** The LibTorch engine's name, as DJL names it (serving.properties `engine=PyTorch`). */
export const ENGINE_NAME = 'PyTorch';
