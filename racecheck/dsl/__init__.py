"""racecheck's own implementation of PyPTO's distributed DSL.

While a user file is loaded or traced, `pypto.language` (`pl`),
`pypto.language.distributed` (`pld`) and the driver-only names (`pypto.ir`,
`DistributedConfig`, `RunConfig`) resolve to the modules built here
(`racecheck.dsl.modules.installed`). Kernel bodies are executed as plain Python with
concrete values; every memory or signal operation is handed to the current
co-simulation context (`racecheck.dsl.context`), which records it as an event.
"""
