import time

count = 0
while True:
    count += 1
    time.sleep(0.05)
