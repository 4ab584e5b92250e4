"""An independent v2 gRPC client: grpcio with stubs generated from Kiln's .proto.

Usage: python3 v2_grpc_client.py STUB_DIR ADDRESS < request.json
request.json: {"model": str, "inputs": [{"name", "datatype", "shape", "raw_b64"}]}
Prints one JSON object: health and metadata answers, then each output's raw bytes (base64),
inferred once with raw_input_contents and once with typed contents (FP32 inputs).
"""

import base64
import json
import sys

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import grpc_predict_v2_pb2 as pb  # noqa: E402
import grpc_predict_v2_pb2_grpc as pb_grpc  # noqa: E402


def outputs_of(response):
    return [
        {
            "name": out.name,
            "datatype": out.datatype,
            "shape": list(out.shape),
            "raw_b64": base64.b64encode(raw).decode(),
        }
        for out, raw in zip(response.outputs, response.raw_output_contents)
    ]


def main():
    spec = json.load(sys.stdin)
    with grpc.insecure_channel(sys.argv[2]) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        metadata = stub.ModelMetadata(pb.ModelMetadataRequest(name=spec["model"]), timeout=30)
        result = {
            "live": stub.ServerLive(pb.ServerLiveRequest(), timeout=30).live,
            "ready": stub.ServerReady(pb.ServerReadyRequest(), timeout=30).ready,
            "model_ready": stub.ModelReady(pb.ModelReadyRequest(name=spec["model"]), timeout=30).ready,
            "server_name": stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=30).name,
            "inputs": [
                {"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
                for t in metadata.inputs
            ],
        }

        raw = pb.ModelInferRequest(model_name=spec["model"], id="py-raw")
        typed = pb.ModelInferRequest(model_name=spec["model"], id="py-typed")
        for tensor in spec["inputs"]:
            data = base64.b64decode(tensor["raw_b64"])
            for request in (raw, typed):
                entry = request.inputs.add()
                entry.name = tensor["name"]
                entry.datatype = tensor["datatype"]
                entry.shape.extend(tensor["shape"])
            raw.raw_input_contents.append(data)
            # Typed contents from the same bytes: numpy reads them as little-endian float32.
            typed.inputs[-1].contents.fp32_contents.extend(np.frombuffer(data, dtype="<f4"))

        answer = stub.ModelInfer(raw, timeout=60)
        result["id"] = answer.id
        result["outputs"] = outputs_of(answer)
        result["typed_outputs"] = outputs_of(stub.ModelInfer(typed, timeout=60))

        try:
            stub.ModelInfer(pb.ModelInferRequest(model_name="no-such-model"), timeout=30)
            result["unknown_model"] = "OK"
        except grpc.RpcError as error:
            result["unknown_model"] = error.code().name
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
