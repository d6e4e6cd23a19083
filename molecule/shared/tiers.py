"""The two tiers of the molecule verify cases (molecule/conftest.py deselects, tests/molecule_lanes.py --extended sets).

A case marked ``extended`` runs only when this variable is ``1``; ``make test`` and CI leave it unset.
"""

EXTENDED_ENV = "BSA_MOLECULE_EXTENDED"
