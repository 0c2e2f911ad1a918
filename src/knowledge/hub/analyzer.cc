namespace rampart::knowledge::hub {}
