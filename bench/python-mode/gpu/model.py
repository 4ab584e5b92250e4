# A DJL Serving handler in its usual shape: a service initialized from the first call's
# properties, its weights put on the device Kiln names (device_id).
import numpy as np
import torch
import torchvision
from djl_python import Input, Output


class Service:
    def __init__(self):
        self.initialized = False

    def initialize(self, properties):
        device_id = int(properties["device_id"])
        self.device = torch.device("cpu" if device_id < 0 else "cuda:%d" % device_id)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.manual_seed(0)
        self.model = torchvision.models.resnet18(weights=None).eval().to(self.device)
        self.model_dir = properties["model_dir"]
        self.batch_size = int(properties.get("batch_size", 1))
        self.initialized = True

    def handle(self, inputs):
        batches = inputs.get_batches()
        x = torch.from_numpy(np.stack([b.get_as_numpy()[0] for b in batches])).to(self.device)
        with torch.inference_mode():
            logits = self.model(x).float().cpu().numpy()
        out = Output()
        for i, row in enumerate(logits):
            answer = {"top5": np.argsort(-row)[:5].tolist(), "logit0": float(row[0]),
                      "device": str(self.device), "batch": len(batches)}
            if inputs.is_batch():
                out.add_as_json(answer, batch_index=i)
            else:
                out.add_as_json(answer)
        return out


_service = Service()


def handle(inputs: Input):
    if not _service.initialized:
        _service.initialize(inputs.get_properties())
    if inputs.is_empty():
        return None
    return _service.handle(inputs)
