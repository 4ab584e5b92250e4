/** The TensorFlow engine's name (serving.properties `engine=TensorFlow`). */
export const TENSORFLOW_ENGINE_NAME = 'TensorFlow';
