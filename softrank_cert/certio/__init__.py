"""Certificate format: JSON Schema, array hashing and eddsa-jcs-2022 Data Integrity proofs."""
