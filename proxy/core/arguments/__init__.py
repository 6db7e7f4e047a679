"""Do a tool call's arguments fit the tool the request defined? (issue 25)

Asked once per call, at its end, never per delta: :class:`~.tools.RequestTools` holds a
request's tools as they came (nothing is done per tool when the request arrives) and finds a
tool by name only when a call names it; :mod:`.schemas` compiles that tool's JSON Schema
once per process (jsonschema-rs, chosen by bench/schema_check.py) in a bounded cache keyed by
the schema's bytes; :mod:`.check` says whether the arguments fit and, when not, what kind of
mismatch it is; :mod:`.heal` and :mod:`.coerce` may fix the arguments, only on request, only
into arguments that fit, and never a call that a token limit cut.

Nothing here changes a call that fits, and detection changes nothing at all.
"""
