void main() {
  print('hi');
}
