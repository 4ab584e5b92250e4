// onnx-proto is CommonJS: its namespace arrives as the default export under ESM.
import onnxProto from 'onnx-proto';

export const onnx = onnxProto.onnx;
export type { onnx as OnnxTypes } from 'onnx-proto';
