"""Small user models for the runtime tests (the `--model module:function` contract)."""
