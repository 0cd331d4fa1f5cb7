"""HTTP/1.1 on httptools: keep-alive connection pools and a lean client (`client.py`)."""
