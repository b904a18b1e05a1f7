"""A KServe v2 (Open Inference Protocol) model server for a local sentence-transformers folder.

Run with the interpreter of `.peers/kserve` (`make peers-setup`), never imported by the project's own
code: it needs `kserve`, whose pins differ from ours. It stands for an embedding model served from
KServe or Triton: a BYTES input tensor of texts in, an FP32 tensor [n, dim] of mean-pooled,
L2-normalised embeddings out, under `POST /v2/models/{name}/infer`.

    .peers/kserve/bin/python tests/peers/kserve_minilm.py --model_name minilm \
        --model_dir PATH --http_port 8080 --enable_grpc false
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path

import numpy as np
import torch
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer, model_server
from kserve.errors import InvalidInput
from transformers import AutoModel, AutoTokenizer

INPUT_NAME = "text"
OUTPUT_NAME = "embedding"
DEFAULT_MAX_SEQ_LENGTH = 256


def max_seq_length(model_dir: Path) -> int:
    """The truncation length the model was trained with (sentence_bert_config.json), as SentenceTransformer reads it."""
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        return int(json.loads(config.read_text()).get("max_seq_length", DEFAULT_MAX_SEQ_LENGTH))
    return DEFAULT_MAX_SEQ_LENGTH


class MiniLMEmbedder(Model):
    """Mean pooling over the attention mask, then L2 normalisation: what all-MiniLM-L6-v2's modules.json asks."""

    def __init__(self, name: str, model_dir: Path) -> None:
        super().__init__(name)
        self.model_dir = model_dir
        self.max_length = DEFAULT_MAX_SEQ_LENGTH
        self.tokenizer: object | None = None
        self.encoder: torch.nn.Module | None = None
        self.dim = 0

    def load(self) -> bool:
        if not (self.model_dir / "config.json").is_file():
            raise FileNotFoundError(
                f"no model at {self.model_dir} (config.json missing); pass --model_dir a local "
                f"sentence-transformers folder"
            )
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir, local_files_only=True)
        self.encoder = AutoModel.from_pretrained(self.model_dir, local_files_only=True).eval()
        self.max_length = max_seq_length(self.model_dir)
        self.dim = int(json.loads((self.model_dir / "config.json").read_text())["hidden_size"])
        self.ready = True
        return self.ready

    def get_input_types(self) -> list[dict[str, object]]:
        return [{"name": INPUT_NAME, "datatype": "BYTES", "shape": [-1]}]

    def get_output_types(self) -> list[dict[str, object]]:
        return [{"name": OUTPUT_NAME, "datatype": "FP32", "shape": [-1, self.dim]}]

    def predict(
        self,
        payload: InferRequest,
        headers: dict[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> InferResponse:
        if len(payload.inputs) != 1 or payload.inputs[0].datatype != "BYTES":
            raise InvalidInput(f"expected one BYTES input tensor of texts named {INPUT_NAME!r}")
        texts = [
            t.decode("utf-8") if isinstance(t, bytes) else str(t)
            for t in payload.inputs[0].as_numpy().ravel()
        ]
        if not texts:
            raise InvalidInput("the input tensor holds no text")
        assert self.tokenizer is not None and self.encoder is not None
        batch = self.tokenizer(  # type: ignore[operator]
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        )
        with torch.inference_mode():
            hidden = self.encoder(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        vectors = torch.nn.functional.normalize(pooled, p=2, dim=1).numpy().astype(np.float32)
        output = InferOutput(name=OUTPUT_NAME, shape=list(vectors.shape), datatype="FP32")
        output.set_data_from_numpy(vectors, binary_data=False)
        return InferResponse(
            response_id=payload.id or str(uuid.uuid4()), model_name=self.name, infer_outputs=[output]
        )


def main() -> None:
    parser = argparse.ArgumentParser(parents=[model_server.parser], description=__doc__)
    parser.add_argument("--model_dir", type=Path, required=True, help="local sentence-transformers folder")
    parser.add_argument(
        "--torch_threads", type=int, default=0, help="torch intra-op threads (0: torch's choice)"
    )
    args, _ = parser.parse_known_args()
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    model = MiniLMEmbedder(args.model_name, args.model_dir)
    model.load()
    ModelServer(http_port=args.http_port, enable_grpc=args.enable_grpc, workers=1).start([model])


if __name__ == "__main__":
    main()
