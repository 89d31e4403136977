"""Drop-in retrievers for LangChain and LlamaIndex applications (optional extras).

``hrag_pg.integrations.langchain`` needs ``pip install 'hrag-pg[langchain]'``,
``hrag_pg.integrations.llama_index`` needs ``pip install 'hrag-pg[llama-index]'``.
Each framework is imported only by its own module; ``import hrag_pg`` never
imports either.
"""
