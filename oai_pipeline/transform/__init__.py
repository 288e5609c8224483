"""Transformers: a harvested OAI record becomes target record data (InvenioRDM-shaped).

`oai_import.OAIImportTransformer` (entry point `oai-import`) picks an import from
`imports` by the metadata's root element; `datacite`, `dublin_core` and `arxiv` are the
built-in imports; `rdm_record.RDMRecord` is the output schema every record is validated against.
"""
