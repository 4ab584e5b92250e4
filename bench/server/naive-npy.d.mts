import type { Tensor } from 'onnxruntime-node';

/** A float32 npy body as an ONNX Runtime tensor (the data copied out of the body). */
export function readNpy(body: Buffer): Tensor;
/** An ONNX Runtime tensor as an npy body. */
export function writeNpy(tensor: Tensor): Buffer;
