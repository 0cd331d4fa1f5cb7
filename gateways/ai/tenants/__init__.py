"""What the AI gateway keeps per tenant in the key-value store and shares with the control
plane: the store layout (`keys.py`)."""
