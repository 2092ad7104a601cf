"""Package data: the JSON Schema of the certificate format (installed as ``softrank_cert.schema``)."""
