/** The Python engine's name (serving.properties `engine=Python`). */
export const ENGINE_NAME = 'Python';
