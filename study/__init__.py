"""The studies and commands that compose every other stage (they start services, run load, analyse and build
reports, so they sit on top of those stages): `precision`, `matrix`, `verify`, `canary`, `sweep`, `history`,
`bench` (bench and search), with the evaluation corpus (`corpus`) and fp32 vectors (`vectors`,
`reference_vectors`) that several of them read.
"""
