"""The transform as it was before it was optimised, kept verbatim as the oracle of the tests.

`test_reference.py` runs these modules and the package side by side on real, generated and
mutated records and requires the same output bytes and the same errors. Do not "fix" or speed
up anything here: its only job is to be the old behaviour.
"""
