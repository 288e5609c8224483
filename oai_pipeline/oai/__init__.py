"""The OAI-PMH client: everything between a source's base URL and a list of HarvestedRecords.

- ``client.OAIClient`` -- Identify, list pages, resumable sweeps, GetRecord, ListSets.
- ``reader.Reader`` / ``reader.OAIPMHReader`` -- the loader plug-in interface and the built-in.
- ``windows`` -- Dagster [start, end) windows as inclusive OAI from/until.
- ``pages`` (one strict parse per response), ``cleaning`` (illegal characters, wrong
  encodings), ``flow`` (rate limits, Retry-After, backoff), ``errors``, ``types``.
"""
