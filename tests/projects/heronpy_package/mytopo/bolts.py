from heronpy.api.bolt.bolt import Bolt


class Shout(Bolt):
    outputs = ["letter"]

    def process(self, tup):
        self.emit([tup.values[0].upper() + "!"])
