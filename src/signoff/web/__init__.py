"""The web inbox: page shells, sign-in and static scripts; every action goes through the API."""
