"""Drop-in retrievers for LangChain and LlamaIndex applications (optional extras).

``hrag_pg.integrations.langchain`` needs the ``langchain`` extra (``pip install '.[langchain]'`` in the checkout),
``hrag_pg.integrations.llama_index`` the ``llama-index`` extra.
Each framework is imported only by its own module; ``import hrag_pg`` never
imports either.
"""
