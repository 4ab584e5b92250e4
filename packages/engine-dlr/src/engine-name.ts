/** The DLR engine's name (serving.properties `engine=DLR`). */
export const ENGINE_NAME = 'DLR';
