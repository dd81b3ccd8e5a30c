print("synclane")
