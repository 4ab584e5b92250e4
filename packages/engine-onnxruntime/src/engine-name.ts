/** The ONNX Runtime engine's name (serving.properties `engine=OnnxRuntime`). */
export const ENGINE_NAME = 'OnnxRuntime';
