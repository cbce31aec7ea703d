"""Check a candidate ONNX file of all-MiniLM-L6-v2 against the packaged model before anyone runs it.

    .venv/bin/python bench/embedding_candidate.py PATH/TO/model.onnx [--sha256 HEX]

Prints, for the candidate beside today's embedder (the cached int8 export) and the packaged float model (torch):
  * the graph: operators used, custom domains, external data (a model must be one plain ONNX file of standard ops);
  * the weights: every float tensor of the packaged model found in the candidate, bit-equal or, when stored as
    int8 with a scale, within half a quantization step of the float weight (and each channel's scale = max|w| / 127);
  * the vectors over a few hundred varied texts (LoCoMo dev turns and questions, code, numbers, other scripts,
    emoji, empty, past the 256-token window): cosine to the float model and to today's embedder, nearest-neighbour
    agreement of questions against turns, a text's vector alone and within a batch;
  * CPU time of one short query and one 60-word text, each runtime on one thread.
Needs the candidate's tokenizer to be the packaged model's (it uses that one).
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.locomo import turns_and_questions  # noqa: E402


def _texts() -> tuple[list[str], list[str], list[str]]:
    dataset = REPO.parent / "shared" / "bench" / "locomo-dev.json"
    turns, questions = turns_and_questions(json.loads(dataset.read_text()))
    extra = ["ok", "?", "", "🙂🙂🙂", "def f(x):\n    return x ** 2  # square", "SELECT * FROM users WHERE id = 42;",
             "Mein Hund heißt Rex und ist drei Jahre alt.", "私は東京に住んでいます。", "€1,234.56 due on 2024-03-01",
             "sk-test-0000 is not my password", "word " * 400, "The quick brown fox jumps over the lazy dog. " * 40]
    return turns[::8][:300], questions[::4][:100], extra


def check_graph(model) -> None:
    ops = collections.Counter((n.domain or "ai.onnx", n.op_type) for n in model.graph.node)
    external = [t.name for t in model.graph.initializer if t.data_location != 0]
    print("graph     opsets", [(o.domain or "ai.onnx", o.version) for o in model.opset_import],
          "| domains", sorted({d for d, _ in ops}), "| external data", external or "none")
    print("          ops", dict(sorted(collections.Counter(op for _, op in ops.elements()).items())))
    print("          inputs", [i.name for i in model.graph.input], "outputs", [o.name for o in model.graph.output])


def check_weights(model, float_dir: Path) -> None:
    import numpy as np
    from onnx import numpy_helper
    from safetensors.numpy import load_file

    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    reference = load_file(str(float_dir / "model.safetensors"))
    consumers = collections.defaultdict(list)
    for node in model.graph.node:
        for name in node.input:
            consumers[name].append(node)

    def dequantized(name):
        return inits[name + "_q"].astype(np.float32) * inits[name + "_scale"]

    def stored(name):  # a float tensor, or an int8 one with its scale
        return inits[name] if name in inits else dequantized(name) if name + "_q" in inits else None

    # Plain tensors by name (any prefix the exporter added); matrix weights by the bias that follows their MatMul.
    matched, equal, quantized, worst_step, worst_scale = {}, 0, 0, 0.0, 0.0
    transposed = set()  # a MatMul's right-hand side is the torch Linear's weight transposed
    for name in {n[:-2] if n.endswith("_q") else n for n in inits if not n.endswith("_scale")}:
        plain = next((k for k in reference if name == k or name.endswith("." + k)), None)
        if plain is not None:
            matched[plain] = name
    for node in model.graph.node:
        if node.op_type == "MatMul" and stored(node.input[1]) is not None and node.input[1] not in matched.values():
            follow = consumers[node.output[0]]
            bias = next((i for n in follow for i in n.input if i in inits and i.endswith(".bias")), None)
            key = next((k for k in reference if bias and bias.endswith(k)), None)
            if key:
                matched[key.replace(".bias", ".weight")] = node.input[1]
                transposed.add(node.input[1])
    for key, name in matched.items():
        want = reference[key]
        got = stored(name).T if name in transposed else stored(name)
        if name + "_q" in inits:
            quantized += 1
            scale = np.broadcast_to(inits[name + "_scale"], inits[name + "_q"].shape)
            scale = scale.T if name in transposed else scale
            worst_step = max(worst_step, float((np.abs(got - want) / scale).max()))
            per_channel = np.abs(inits[name + "_q"]).max(axis=1 if inits[name + "_scale"].shape[0] != 1 else 0)
            worst_scale = max(worst_scale, float(np.abs(per_channel - 127).max()))
        else:
            equal += int(np.array_equal(got, want))
    missing = sorted(set(reference) - set(matched))
    print(f"weights   {len(matched)} of {len(reference)} packaged tensors found; {equal} float ones bit-equal of "
          f"{len(matched) - quantized}; {quantized} int8 ones at most {worst_step:.3f} quantization steps from the "
          f"float weight (0.5 = exact rounding), channels' max |q| off 127 by at most {worst_scale:.0f}; "
          f"not found: {missing}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("candidate")
    p.add_argument("--sha256", help="the checksum the candidate's publisher states")
    args = p.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import django

    django.setup()
    import numpy as np
    import onnx

    from infra.embedder import LocalEmbedder, _OnnxDirect
    from infra.embedder_export import local_model_path, onnx_model_dir

    digest = hashlib.sha256(Path(args.candidate).read_bytes()).hexdigest()
    print(f"candidate {args.candidate}: sha256 {digest}"
          + ("" if not args.sha256 else " (as stated)" if digest == args.sha256 else " (NOT the stated checksum)"))
    model = onnx.load(args.candidate)
    check_graph(model)
    check_weights(model, Path(local_model_path()))

    today = LocalEmbedder()
    folder = onnx_model_dir(local_model_path(), today.runtime)
    candidate = _OnnxDirect(folder, "onnx")
    import onnxruntime

    from infra.embedder_export import session_options

    candidate._session = onnxruntime.InferenceSession(args.candidate, sess_options=session_options(),
                                                      providers=["CPUExecutionProvider"])
    candidate._inputs = [i.name for i in candidate._session.get_inputs()]
    candidate._output = [o.name for o in candidate._session.get_outputs()].index("last_hidden_state")
    exact = LocalEmbedder(runtime="torch")

    turns, questions, extra = _texts()
    texts = turns + questions + extra
    vectors = {"candidate": np.array([candidate([t])[0] for t in texts]),
               f"today ({today.runtime})": np.array(today._compute(texts)),
               "float (torch)": np.array(exact._compute(texts))}
    names = list(vectors)
    print(f"vectors   {len(texts)} texts ({len(turns)} LoCoMo turns, {len(questions)} questions, {len(extra)} others)")
    for a, b in ((names[0], names[2]), (names[1], names[2]), (names[0], names[1])):
        cos = (vectors[a] * vectors[b]).sum(axis=1)
        worst = texts[int(cos.argmin())]
        print(f"          {a} vs {b}: cosine min {cos.min():.4f} p1 {np.percentile(cos, 1):.4f} "
              f"mean {cos.mean():.5f} (lowest: {worst[:30]!r})")

    def neighbours(x, k=10):
        q, t = x[len(turns):len(turns) + len(questions)], x[:len(turns)]
        return np.argsort(-(q @ t.T), axis=1)[:, :k]

    reference = neighbours(vectors[names[2]])
    for name in names[:2]:
        mine = neighbours(vectors[name])
        top1 = float((mine[:, 0] == reference[:, 0]).mean())
        overlap = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(mine, reference, strict=True)]))
        print(f"          {name}: nearest turn of a question as the float model's {top1:.2f}; top-10 overlap "
              f"{overlap:.3f}")
    batched = candidate(texts[:64])
    spread = np.abs(batched - vectors[names[0]][:64]).max()
    print(f"          candidate: a text in a batch of 64 vs alone, largest difference {spread:.2e}")

    runners = {"candidate": lambda t: candidate(t), names[1]: today._compute, names[2]: exact._compute}
    for label, text in (("short query", ["What did I say about the hotel budget last week?"]),
                        ("60-word text", ["I moved to Lisbon in May 2023 and started at a studio by the river. " * 4])):
        row = []
        for name, run in runners.items():
            for _ in range(3):
                run(text)
            t = time.process_time()
            for _ in range(30):
                run(text)
            row.append(f"{name} {(time.process_time() - t) / 30 * 1000:.1f} ms")
        print(f"cpu       {label}: " + ", ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
